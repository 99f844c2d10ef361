"""The assistant's domain, apart from its interfaces: answers (the assistant, its evidence and
answer parts, conversations), what was asked and whether it helped (feedback, coverage gaps), and
the guides as a static site. No web framework and no command line here: `oomkb.api.cli`,
`oomkb.api.http` and `oomkb.api.mcp` present what this room computes."""
