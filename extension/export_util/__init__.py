"""Small helpers of ExecuTorch's export scripts (`save_pte_program`)."""
