"""Network facts shared by the wire and the probe steps: address literals (addresses), what a socket
error means (sockets), and how a dual-stack client picks among addresses (dualstack).
"""
