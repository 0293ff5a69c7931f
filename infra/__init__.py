"""llmctl infra layer."""
