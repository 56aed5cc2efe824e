"""Command-line interface: one thin module per subcommand; errors become exit codes in main."""
