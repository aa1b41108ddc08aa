# (empty: owned by the component that fills it)
NV_COMM_SOURCES =
