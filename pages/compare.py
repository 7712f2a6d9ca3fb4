"""compare page (in progress)."""

import streamlit as st

st.title("compare")
