"""`python -m convgraph.cli` runs the command line."""

from convgraph.cli.entry import main

main()
