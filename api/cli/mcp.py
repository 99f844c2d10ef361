"""`oomkb mcp`: the oomkb tools for coding agents, over MCP on stdin/stdout."""

from __future__ import annotations

import typer

MCP_HELP = (
    "Serve the oomkb tools to a coding agent over the Model Context Protocol on stdin/stdout "
    "(the agent starts this command): search_guides, diagnose_log, ask, estimate_program, "
    "plan_program, read_report, and each guide as a resource. The program tools follow the "
    "service's rules: off unless OOMKB_ENABLE_ESTIMATE=1, run in the bubblewrap sandbox under "
    "the OOMKB_ESTIMATE_* limits. Needs the `mcp` extra: pip install 'oomkb[mcp]'."
)


def register(app: typer.Typer) -> None:
    """Add the `mcp` command to `app`."""
    app.command("mcp", help=MCP_HELP)(mcp_command)


def mcp_command() -> None:
    """Serve MCP over stdio until the client closes the connection."""
    from oomkb.api.cli.boundary import user_errors
    from oomkb.api.mcp.server import serve_stdio

    with user_errors():
        serve_stdio()
