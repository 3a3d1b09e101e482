//! The node agent: its facts (files of the wrong shape, missing runtimes), the commands it runs (podman, systemctl) and its settings.
