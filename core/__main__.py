"""`python -m llmctl` runs the same CLI as the `llmctl` console script."""

from llmctl.cli.app import main

if __name__ == "__main__":
    main()
