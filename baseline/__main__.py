from baseline.launch import main

main()
