"""When and in which order: the Automation API engine, `up`/`down`/`preview` orchestration, progress,
the state backend, stack bookkeeping, status and the reports the CLI prints."""
