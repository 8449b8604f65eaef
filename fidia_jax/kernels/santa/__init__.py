"""SANTA / S²ANTA stochastic decode attention."""
