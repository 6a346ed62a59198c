"""Stage 2, environment: the framework images a trial runs in and the source it runs from."""
