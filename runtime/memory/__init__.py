"""Memory banks: an org's memory that outlives agent runs (the ``memory_banks`` System
Tool, seeds/004), kept in the service's store and searched here, offline."""
