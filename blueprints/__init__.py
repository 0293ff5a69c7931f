"""llmctl blueprints layer."""
