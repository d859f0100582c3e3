from units_api.cli import main

main()
