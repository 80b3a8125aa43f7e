"""What an app is to the shared layer: its definition, its command-line parts, how
apps are found, the shape of its topics."""
