from bayescrl.cli import main

main()
