"""A plain torch loop under torchrun (gloo, CPU) for the `fleet watch` tests: a linear model
fitting y = 3x, all-reducing its gradients by hand, printing its own line every 10 steps:

    step 40 | train/loss 0.0123 | lr 0.01

No Trainer dict and no `loss=`: the watch finds its losses only through the policy's
job.loss_regex. --lr 1e3 blows the loss up to inf and then nan within a few steps.
--save_every writes step_N.pt checkpoints (rank 0). After --steps the ranks stay alive.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--step_seconds", type=float, default=0.02)
    parser.add_argument("--save_every", type=int, default=0)
    parser.add_argument("--output_dir", default="out")
    parser.add_argument("--hold_s", type=float, default=600.0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for step in range(1, args.steps + 1):
        x = torch.randn(32, 16)
        loss = torch.nn.functional.mse_loss(model(x), 3 * x.sum(dim=1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        for parameter in model.parameters():
            dist.all_reduce(parameter.grad)
            parameter.grad /= dist.get_world_size()
        optimizer.step()
        if rank == 0 and step % 10 == 0:
            print("step %d | train/loss %.4f | lr %g" % (step, loss.item(), args.lr), flush=True)
        if rank == 0 and args.save_every and step % args.save_every == 0:
            os.makedirs(args.output_dir, exist_ok=True)
            torch.save(model.state_dict(), os.path.join(args.output_dir, "step_%d.pt" % step))
        time.sleep(args.step_seconds)
    time.sleep(args.hold_s)


if __name__ == "__main__":
    main()
