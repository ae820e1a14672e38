"""Writing kernels with a language model: the client for any OpenAI-compatible
chat-completions endpoint (:mod:`opbench.agent.client`); prompts, the loop and the
scoring API build on it."""
