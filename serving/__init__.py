"""llmctl serving layer."""
