"""`computefence doctor`: check the machine this runs on."""
