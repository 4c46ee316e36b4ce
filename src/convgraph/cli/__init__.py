"""The command-line shell: argument parsing and output over `Replica`."""
