from oomkb.api.cli.main import main

main()
