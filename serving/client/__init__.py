"""What runs on the user's machine, beside the CLI: the bench and chat clients, the local target's
Ray Serve runner and the tiny test model. Pod code (the rest of ``llmctl.serving``) never imports it."""
