// A run's result is what the passes return: whoever runs them holds it.
@_exported import RunResults
