"""`python -m convgraph.cli` runs the command line."""

from convgraph.cli.main import main

main()
