"""simengine: an LLM-training performance simulator (step time, MFU, memory, pipeline timeline).

The engine never imports Streamlit, prints nothing and reads no environment variables.
"""
