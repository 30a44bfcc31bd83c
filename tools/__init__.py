"""Development tools (not shipped): servewise's tools, run from the repository root."""
