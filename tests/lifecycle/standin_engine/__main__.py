from standin_engine.cli import main

main()
