"""Developer plumbing behind `make run` / `make test`: embedded services and a process supervisor."""
