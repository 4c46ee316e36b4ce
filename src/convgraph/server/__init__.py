"""The sync server: signed HTTP access to a replica (`app`, `auth`, `access`, `live`, `openapi`)."""
