# (empty: owned by the component that fills it)
