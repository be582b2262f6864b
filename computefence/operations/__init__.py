"""Fleet operations around a check run: the launch gate file, the run history and the alerts."""
