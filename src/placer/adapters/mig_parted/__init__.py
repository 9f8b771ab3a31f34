"""NVIDIA ``nvidia-mig-parted`` configuration files: read (:mod:`.config`), checked against
placer's bundled MIG tables (:mod:`.check`) and applied to a snapshot (:mod:`.apply`)."""
