//! DTrace backend (in progress).
