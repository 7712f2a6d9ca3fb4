"""run page (in progress)."""

import streamlit as st

st.title("run")
