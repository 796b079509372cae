# The frame of every job: one thread in the CPU environment, no GPU, the job entry (common.smk: JOB) as the
# body. Each stage's rules are `use rule job_frame as <rule> with:` and restate only what differs (their
# paths from LAYOUT, their params from job(), a GPU stage's env, threads and resources). The frame itself
# is never a job: it has no output, and each rule replaces its log.


rule job_frame:
    log:
        LAYOUT.log("job_frame"),
    conda:
        "../envs/cpu.yaml"
    threads: 1
    resources:
        gpu=0,
    params:
        files=job_files,
    shell:
        JOB
