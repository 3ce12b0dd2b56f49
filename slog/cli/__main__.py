from slog.cli.app import main

main()
