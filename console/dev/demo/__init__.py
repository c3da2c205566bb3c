"""Demo and test helpers: stand-ins for the outside world that agents act on."""
