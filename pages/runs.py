"""runs page (in progress)."""

import streamlit as st

st.title("runs")
