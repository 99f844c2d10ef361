"""The HTTP service: REST, probes, the web page and the Slack adapter."""
