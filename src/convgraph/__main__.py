"""`python -m convgraph` runs the command line, as the `convgraph` script does."""

from convgraph.cli.entry import main

main()
