"""The web viewer: `layout` (pure: the DAG's lanes and edges), `views` (what pages show, read
from a replica), `sessions` (tokens), `app` (the Starlette routes, templates and static files)."""
