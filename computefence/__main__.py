from computefence.cli import main

main()
