from api.cli.main import main

main()
