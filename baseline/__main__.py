from baseline.cli import main

main()
