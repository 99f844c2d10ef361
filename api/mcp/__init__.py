"""oomkb as tools for coding agents: the Model Context Protocol server (stdio and `/mcp`)."""
