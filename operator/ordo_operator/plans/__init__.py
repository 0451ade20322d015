"""Pure planning: state in, plan out. No I/O; handlers read state and apply these plans."""
