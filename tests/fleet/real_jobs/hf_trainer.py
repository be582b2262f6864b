"""A real Hugging Face Trainer run for the `fleet watch` tests: a tiny BERT built from a config
(no hub download) classifying 8-token sequences, on CPU with gloo under torchrun.

--labels learnable: the label is the first token's parity, so the loss falls.
--labels uninformative: random labels, independent of the inputs: the loss sits at chance
(logged as 2 x ln 2 = 1.386 by Transformers 5 under 2-rank DDP).
--step_seconds paces the run so a watch pass meets it mid-way; after max_steps the ranks stay
alive (--hold_s) so the watch still sees a job.
"""

import argparse
import time

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments


class Tokens(torch.utils.data.Dataset):
    def __init__(self, labels, n=4096):
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randint(4, 64, (n, 8), generator=generator)
        if labels == "learnable":
            self.y = self.x[:, 0] % 2
        else:
            self.y = torch.randint(0, 2, (n,), generator=generator)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return {"input_ids": self.x[index], "labels": self.y[index]}


class Pace(TrainerCallback):
    def __init__(self, seconds):
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(self.seconds)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--labels", choices=("learnable", "uninformative"), default="learnable")
    parser.add_argument("--max_steps", type=int, default=300)
    parser.add_argument("--save_steps", type=int, default=100)
    parser.add_argument("--step_seconds", type=float, default=0.0)
    parser.add_argument("--hold_s", type=float, default=600.0)
    args = parser.parse_args()
    config = BertConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    training = TrainingArguments(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        per_device_train_batch_size=16,
        learning_rate=5e-3,
        logging_steps=10,
        save_steps=args.save_steps,
        save_total_limit=2,
        report_to=[],
        use_cpu=True,
        ddp_backend="gloo",
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=BertForSequenceClassification(config),
        args=training,
        train_dataset=Tokens(args.labels),
        callbacks=[Pace(args.step_seconds)],
    )
    trainer.train()
    time.sleep(args.hold_s)


if __name__ == "__main__":
    main()
