"""Field choices from the tuples in runtime/states.py, the one source of status names."""


def choices(values):
    return [(v, v) for v in values]
